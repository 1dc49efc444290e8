import type { Response } from 'express';

const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * Writes the very status, headers and bytes of `res.status(status).json(body)` without express's
 * per-call settings, mime and ETag work, which a read would otherwise pay on every answer. A
 * conditional request still goes through express, whose freshness check answers it as before.
 */
export function sendJson(res: Response, status: number, body: unknown): void {
  const req = res.req;
  if (req.headers['if-none-match'] !== undefined || req.headers['if-modified-since'] !== undefined) {
    res.status(status).json(body);
    return;
  }
  const text = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader('Content-Type', JSON_TYPE);
  res.setHeader('Content-Length', Buffer.byteLength(text));
  // HEAD: the length of the body a GET would get, and no body (as express's res.send).
  if (req.method === 'HEAD') res.end();
  else res.end(text);
}

/** The success envelope, `{ success: true, data }`, with its status. */
export function sendData(res: Response, status: number, data: unknown): void {
  sendJson(res, status, { success: true, data });
}
