"""logbox-eps: a box's sustained EPS measured from a second machine (cli.py; README.md
"Measuring EPS"). load.py sends, measure.py asks the store, report.py writes the report."""
