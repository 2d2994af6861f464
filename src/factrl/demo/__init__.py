"""The bundled demo corpus and claims (written for this project)."""
