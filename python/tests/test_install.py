"""tools/install-python.sh (docs/python.md#install): installed into a fresh user
site-packages (a temporary HOME), `import lpx` works from another folder with no
PYTHONPATH, gives the built module's bits, and --uninstall removes it again."""
import os
import pathlib
import subprocess

import numpy as np
import pytest

import lpx

REPO = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tools" / "install-python.sh"
PYTHON = "/usr/bin/python3"


def run(args, env, cwd):
    return subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(not os.access(PYTHON, os.X_OK), reason="needs Debian's /usr/bin/python3")
def test_install_into_a_fresh_home_and_uninstall(tmp_path):
    # the package under test: <build>/python/lpx/__init__.py -> <build>
    build = pathlib.Path(lpx.__file__).resolve().parents[2]
    home = tmp_path / "home"
    home.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONHOME")}
    env["HOME"] = str(home)
    env["PYTHONDONTWRITEBYTECODE"] = "1"

    p = run([str(SCRIPT), "--build-dir", str(build)], env, elsewhere)
    assert p.returncode == 0, p.stderr
    site = run([PYTHON, "-m", "site", "--user-site"], env, elsewhere).stdout.strip()
    assert site.startswith(str(home)), site
    assert (pathlib.Path(site) / "lpx" / "INSTALLED_BY_LPX").is_file()

    code = ("import lpx, numpy as np; print(lpx.__file__); "
            "print(lpx.cast(np.array([1.0, 0.3, -500.0], np.float32), 'e4m3').tolist())")
    p = run([PYTHON, "-c", code], env, elsewhere)
    assert p.returncode == 0, p.stderr
    where, codes = p.stdout.strip().splitlines()
    assert where.startswith(site), where  # the installed copy, not the build tree
    want = lpx.cast(np.array([1.0, 0.3, -500.0], np.float32), "e4m3").tolist()
    assert codes == str(want)

    # installing again updates in place
    assert run([str(SCRIPT), "--build-dir", str(build)], env, elsewhere).returncode == 0

    p = run([str(SCRIPT), "--uninstall"], env, elsewhere)
    assert p.returncode == 0, p.stderr
    assert not (pathlib.Path(site) / "lpx").exists()
    p = run([PYTHON, "-c", "import lpx"], env, elsewhere)
    assert p.returncode != 0 and "No module named 'lpx'" in p.stderr


def test_install_leaves_a_foreign_lpx_alone(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONNOUSERSITE")}
    env["HOME"] = str(home)
    site = pathlib.Path(run([PYTHON, "-m", "site", "--user-site"], env, tmp_path).stdout.strip())
    (site / "lpx").mkdir(parents=True)
    (site / "lpx" / "__init__.py").write_text("# someone else's\n")
    p = run([str(SCRIPT), "--uninstall"], env, tmp_path)
    assert p.returncode == 1 and "not installed by this script" in p.stderr
    assert (site / "lpx" / "__init__.py").read_text() == "# someone else's\n"
    p = run([str(SCRIPT), "--bogus"], env, tmp_path)
    assert p.returncode == 2 and "unknown argument" in p.stderr
    p = run([str(SCRIPT), "--build-dir", str(tmp_path)], env, tmp_path)  # nothing built there
    assert p.returncode == 1 and "no built module" in p.stderr
