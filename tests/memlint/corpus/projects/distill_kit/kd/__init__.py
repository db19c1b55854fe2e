"""A distillation kit: helpers come in by star import, and a base class's loader loop
hands each batch to a hook that subclasses in other modules override."""
