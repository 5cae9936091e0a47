"""VLM judges (Gemini via google-genai) behind the core Judge interface."""
