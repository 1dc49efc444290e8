import { useEffect, useRef } from 'react';

function Notice({ title, children }: { title: string; children: React.ReactNode }) {
  const h1 = useRef<HTMLHeadingElement>(null);
  useEffect(() => h1.current?.focus(), []);
  return (
    <main id="contenido" className="main narrow">
      <h1 ref={h1} tabIndex={-1}>
        {title}
      </h1>
      {children}
    </main>
  );
}

/** A used or expired link, or a session that ended (portal.md). */
export function InvalidLinkPage() {
  return (
    <Notice title="Enlace no válido">
      <p>El enlace para entrar al portal ya se usó o expiró, o su sesión terminó.</p>
      <p>Vuelva al sitio del courier: desde allí puede abrir el portal con un enlace nuevo.</p>
    </Notice>
  );
}

export function SignedOutPage() {
  return (
    <Notice title="Sesión cerrada">
      <p>Cerró su sesión del portal de integraciones.</p>
      <p>Para volver a entrar, abra el portal desde el sitio del courier.</p>
    </Notice>
  );
}
