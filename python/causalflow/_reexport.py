"""Helper of the submodule files: copy an extension submodule's public names into a module."""


def reexport(namespace, ext_module):
    names = [k for k in vars(ext_module) if not k.startswith("_")]
    for k in names:
        namespace[k] = getattr(ext_module, k)
    namespace["__doc__"] = ext_module.__doc__
    namespace["__all__"] = sorted(names)
