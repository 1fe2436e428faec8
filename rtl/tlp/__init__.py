"""TLP formats: header layouts, the internal TLP stream, and the Stratix IV hard-IP adapters."""
