"""One evaluation: the pipeline, its files, record, names, report and chart."""
