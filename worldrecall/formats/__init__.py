"""Dataset file formats several plugins read (ViPE sidecars, OpenEXR depth). Imports only `core`."""
