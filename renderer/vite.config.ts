// Builds the renderer into dist/renderer with a relative base, so the same files
// load from file:// under Electron and from the web host.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const here = path.dirname(fileURLToPath(import.meta.url));

export default defineConfig({
  root: here,
  base: './',
  build: {
    outDir: path.resolve(here, '../dist/renderer'),
    emptyOutDir: true,
    sourcemap: true,
    // No inline scripts or eval: the CSP is script-src 'self'.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    // React + xterm.js (with WebGL) in one chunk is expected for a local desktop app.
    chunkSizeWarningLimit: 2000,
  },
});
