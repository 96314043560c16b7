"""Helpers the store suites share: a Python oracle of the tokenizer, corpus generators and thin
wrappers around the `logbox` CLI verbs (see indexer/cli/README.md for the contract they follow)."""
