"""A retrieval index over a text encoder whose encoding method turns gradients off itself."""
