"""Projections: state, context windows and provider payloads folded from events."""
