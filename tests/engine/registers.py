"""A module a point imports before it reads its spec (``Point.imports``): importing it is
what a user's module that registers a model does; here it only has to be importable."""
