"""DVC stage (always run): write the environment fingerprint every build and bench depends on."""

from pipeline.files import write_json
from pipeline.fingerprint import fingerprint
from pipeline.layout import env_file

if __name__ == "__main__":
    write_json(env_file(), fingerprint())
