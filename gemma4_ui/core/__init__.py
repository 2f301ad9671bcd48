"""The protocol core: the canonical conversation, typed events, prompt specs, reply parsing,
transcripts. Pure Python; knows no engine, tool registry or UI."""
