"""The `git audit` command line: the only package that imports typer (in :mod:`.app`).

:mod:`.entry` holds the console-script entry point; :mod:`.grammar` declares the hot commands'
parameters once; :mod:`.fast` answers them without typer.
"""
