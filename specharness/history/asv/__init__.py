"""ASV plumbing: the suite's experiments and values, their notes and the plugin that writes them into ASV's result
files, the release ledger, the machine record, the spread file and recomputing results from journals."""
