import {
  AppError,
  MAX_PROBLEMS,
  validateEmpresaCreate,
  validateGuiaBatch,
  validateGuiaCreate,
  validateGuiaEvento,
  validateWebhookCreate,
} from '@svc/contracts';

function problemOf(validate: (v: unknown) => unknown, value: unknown): AppError {
  try {
    validate(value);
  } catch (err) {
    if (err instanceof AppError) return err;
    throw err;
  }
  throw new Error('the value was accepted');
}

describe('request validation lists every problem', () => {
  it('names each bad field of a body in one VALIDATION_ERROR, with its path', () => {
    const err = problemOf(validateGuiaCreate, {
      destinatario: { nombre: '', telefono: 5 },
      paquete: { peso: -1, color: 'rojo' },
      referencia: 'x'.repeat(101),
    });
    expect(err.code).toBe('VALIDATION_ERROR');
    expect(err.status).toBe(400);
    expect(err.message.split('; ').sort()).toEqual(
      [
        'destinatario.direccion is required',
        'destinatario.nombre must not be empty',
        'destinatario.telefono must be of type string',
        'paquete.color is not an accepted field',
        'paquete.peso must be > 0',
        'referencia must be at most 100 characters',
      ].sort(),
    );
  });

  it(`names at most ${MAX_PROBLEMS} problems and counts the rest`, () => {
    const err = problemOf(validateGuiaBatch, { guias: Array.from({ length: 10 }, () => ({ destinatario: {}, paquete: {} })) });
    // Each shipment lacks nombre, telefono, direccion and peso: 40 problems.
    const parts = err.message.split('; ');
    expect(parts).toHaveLength(MAX_PROBLEMS + 1);
    expect(parts[0]).toBe('guias[0].destinatario.nombre is required');
    expect(parts.at(-1)).toBe(`and ${40 - MAX_PROBLEMS} more`);
  });

  it('says each problem once, and not the summary of a conditional', () => {
    expect(problemOf(validateGuiaEvento, { evento: 'GUIA_DEVOLUCION' }).message).toBe('motivo is required');
    expect(problemOf(validateWebhookCreate, { url: 'https://x.example', eventos: ['NOPE', 'NOPE'] }).message).toMatch(
      /^eventos\[0\] must be one of .*; eventos\[1\] must be one of .*; eventos must NOT have duplicate items/,
    );
  });

  it('a body too large to list gets its first problem only, quickly', () => {
    const huge = Object.fromEntries(Array.from({ length: 100_000 }, (_, i) => [`k${i}`, 1]));
    const start = Date.now();
    const err = problemOf(validateEmpresaCreate, huge);
    expect(Date.now() - start).toBeLessThan(1000);
    expect(err.message.split('; ')).toHaveLength(1);
    expect(problemOf(validateGuiaBatch, { guias: Array(200_000).fill(1) }).message).toBe('guias must have at most 100 items');
  });

  it('a valid body passes unchanged, and the unstorable-string check still runs after the schema', () => {
    const body = { nombre: 'Empresa' };
    expect(validateEmpresaCreate(body)).toBe(body);
    expect(problemOf(validateEmpresaCreate, { nombre: 'a\u0000b' }).message).toBe('nombre must not contain NUL characters or unpaired surrogates');
  });
});
