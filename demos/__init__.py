"""Runnable programs that show the project at work, each started as `python -m demos.<name>`:
they train on data they generate (or a file the user gives), show progress, save what they
made under runs/<name>-<timestamp>/ (or --out DIR), and end with one line holding the
measured result. Every demo takes --help, --quick (a few seconds, for CI) and --seed.
What they share and are built from is in demos/support/."""
