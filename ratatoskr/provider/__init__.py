"""The plane stores: memory (chunks + vectors) and affect (states + events), with references."""
