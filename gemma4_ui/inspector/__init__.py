"""The inspector: what the model sees (message data, raw template, expanded ids), exact token
counts, soft-token maps and token probabilities, as HTML built from escaped text."""
