"""A sentence-encoder package whose copy helper lives in a utilities package."""
