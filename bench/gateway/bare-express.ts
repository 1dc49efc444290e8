// The baseline: a bare express server answering the same JSON as an authenticated GET /api/v1/empresa,
// with nothing else (no auth, no rate limit, no logging, no metrics).
import express from 'express';

const app = express();
app.disable('x-powered-by');
app.set('etag', false);
const data = {
  id: '7d3f0c1e-5b7a-4c7e-9a51-2f1f3f2b9c11',
  nombre: 'Empresa de bench',
  sucursalesHabilitadas: false,
  sucursal: null,
  modo: 'live',
};
app.get('/api/v1/empresa', (_req, res) => {
  res.json({ success: true, data });
});
const server = app.listen(Number(process.env.PORT ?? 0), () => {
  const address = server.address();
  if (address && typeof address === 'object') process.stdout.write(`listening ${address.port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
