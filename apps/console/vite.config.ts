import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

/**
 * The reviewer console's build: Vite transforms TSX itself (no React plugin: it cannot be installed
 * beside Vite 8 here), served by the ledger under /console from dist/console.
 */
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/console/',
  oxc: { jsx: { runtime: 'automatic' } },
  build: {
    outDir: fileURLToPath(new URL('../../dist/console', import.meta.url)),
    emptyOutDir: true,
    // No inline scripts or data: URLs for assets: the console's CSP allows its own files only.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    chunkSizeWarningLimit: 1024,
  },
});
