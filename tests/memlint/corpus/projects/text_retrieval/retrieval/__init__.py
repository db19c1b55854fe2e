"""A retrieval index over a text encoder whose encoding method turns gradients off itself:
held on an attribute (index.py) or built locally (search.py)."""
