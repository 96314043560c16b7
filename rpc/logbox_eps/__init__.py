"""logbox-eps: a box's sustained EPS measured from a second machine (cli.py; README.md
"Measuring EPS"). load.py sends, measure.py asks the store and samples /status, resources.py
turns the samples into each service's CPU, memory and disk I/O, searchers.py times queries
under load, progress.py draws the progress line, report.py writes the report."""
