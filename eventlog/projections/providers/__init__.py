"""Provider adapters: response ingest, history import (and, later, request renderers)."""
