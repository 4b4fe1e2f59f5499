"""Install the course's environment in .venv and start JupyterLab in this folder, on any system.

    python start.py                                  (Windows: py -3.11 start.py; Linux, macOS: python3.11 start.py)
    python start.py --no-browser --port 8890         options for `jupyter lab`
    python start.py --install                        install (or update) .venv only

`make lab` does the same. Installing puts the course's Jupyter configuration into .venv (nbgrader's
instructor tools off), as a plain `pip install .` into an environment of your own would.
"""
import os
import subprocess
import sys
import venv
from pathlib import Path

HERE = Path(__file__).resolve().parent
ENVIRONMENT = HERE / ".venv"
INSTALLED = ENVIRONMENT / ".installed"  # newer than pyproject.toml once installed


def environment_python() -> Path:
    return ENVIRONMENT / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def install():
    if sys.version_info[:2] != (3, 11):
        sys.exit(f"The course needs Python 3.11; this is {sys.version.split()[0]}.\n"
                 f"本课程需要 Python 3.11；当前是 {sys.version.split()[0]}。")
    if not environment_python().exists():
        print("Creating .venv … / 正在创建 .venv……", flush=True)
        venv.create(ENVIRONMENT, with_pip=True)
    if not INSTALLED.exists() or INSTALLED.stat().st_mtime < (HERE / "pyproject.toml").stat().st_mtime:
        print("Installing the course (PyTorch, JupyterLab, nbgrader) … / 正在安装课程环境（PyTorch、JupyterLab、nbgrader）……",
              flush=True)
        subprocess.run([environment_python(), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        str(HERE)], check=True)
        INSTALLED.touch()


def main(argv) -> int:
    install()
    if argv == ["--install"]:
        return 0
    os.chdir(HERE)
    command = [str(environment_python()), "-m", "jupyterlab", *argv]
    if os.name != "nt":  # JupyterLab takes this process's place: a signal to stop it reaches it
        os.execv(command[0], command)
    try:
        return subprocess.call(command)
    except KeyboardInterrupt:  # Ctrl-C also reached JupyterLab, which shuts down on its own
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
