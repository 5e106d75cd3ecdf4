"""Content: seeded templates of each kind of text, and composition of exact-size texts from them."""
