import type { Modo } from '@svc/contracts';

/** Who is calling: the result of authentication, cached for 60 s per token hash. */
export interface Principal {
  tokenId: string;
  tokenHash: string;
  modo: Modo;
  empresa: { id: string; nombre: string; sucursalesHabilitadas: boolean };
  sucursal: { id: string; nombre: string } | null;
}

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      principal?: Principal;
    }
  }
}
