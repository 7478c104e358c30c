"""Icons, example sessions and screenshots; found at run time with importlib.resources."""
