import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

// The portal is served by the gateway at /portal/ (same origin as its API, /portal/v1). `pnpm dev` runs
// Vite's dev server with the API proxied to a gateway on :3000 (`pnpm start`).
export default defineConfig({
  base: '/portal/',
  plugins: [react()],
  build: {
    outDir: 'dist',
    assetsDir: 'assets',
    emptyOutDir: true,
    // The page's CSP allows no inline script: no polyfill injected into index.html.
    modulePreload: { polyfill: false },
    sourcemap: false,
    // Inlined assets would be data: URLs in CSS; every asset stays a file of its own.
    assetsInlineLimit: 0,
  },
  server: {
    proxy: { '/portal/v1': 'http://localhost:3000' },
  },
});
