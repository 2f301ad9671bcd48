"""Media: validate and decode uploads (images, audio, video) and own the files a conversation
holds."""
