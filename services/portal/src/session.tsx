import { createContext, useContext } from 'react';
import type { Session } from './api';

export const SessionContext = createContext<Session | undefined>(undefined);

/** The open session: its company and `usuario` (inside the signed-in layout only). */
export function useSession(): Session {
  const s = useContext(SessionContext);
  if (!s) throw new Error('useSession outside the signed-in layout');
  return s;
}
