"""The engine's option structs (ReaderOptions, LoaderOptions, WriterOptions, PredictOptions,
DatasetOptions of include/recycle/), filled field by field from keyword arguments: the package
hands the engine the structs themselves, not long lists of positional arguments."""


def filled(options, **fields):
    """`options` (a fresh _native.XOptions) with each field set; nested ones as dicts
    (reader=dict(...), data=dict(...)). An unknown field is a bug here: AttributeError."""
    for name, value in fields.items():
        if not hasattr(options, name):
            raise AttributeError(f"{type(options).__name__} has no field {name!r}")
        if isinstance(value, dict):
            filled(getattr(options, name), **value)
        else:
            setattr(options, name, value)
    return options
