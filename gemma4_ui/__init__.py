"""gemma4_ui: chat with, demo and understand Google's Gemma 4 models."""
