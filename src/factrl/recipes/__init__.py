"""Multi-stage recipes: worlds, teachers, warm-ups, GRPO and held-out evaluation composed
into one resumable run (``factrl train factworld``)."""
