"""The planes: verb tables that route wire calls to their stores, and the app factories."""
