"""`course`: the instructor's command line. Each subcommand is a module of course/commands/."""
import argparse
import importlib
import sys

from autograder.messages import message

from .commands import NAMES


class BilingualParser(argparse.ArgumentParser):
    """argparse, whose own error lines are English only, followed by what they mean in Chinese."""

    def error(self, problem):
        self.print_usage(sys.stderr)
        self.exit(2, message("cli_error", prog=self.prog, problem=problem) + "\n")


def main(argv=None) -> int:
    parser = BilingualParser(prog="course", description=message("cli_description"))
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in NAMES:
        command = importlib.import_module(f".commands.{name}", __package__)
        arguments = subparsers.add_parser(name, help=command.HELP)
        command.arguments(arguments)
        arguments.set_defaults(run=command.run)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
