/* logbox web UI: keyboard shortcuts and histogram drag-to-zoom (no inline script: CSP). */
