"""Placeholder: replaced by the module that registers these commands."""


def register(sub) -> None:
    return None
