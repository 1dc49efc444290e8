/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  testMatch: ['<rootDir>/{services,packages}/*/test/**/*.test.ts', '<rootDir>/test/**/*.test.ts'],
  transform: { '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022', parser: { syntax: 'typescript' } }, module: { type: 'commonjs' } }] },
  // ESM sources (packages/cli) import `./x.js` for their `./x.ts`: the same file without the extension.
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  maxWorkers: 2,
  testTimeout: 30000,
  // Each file owns its database and Redis prefix, so files run in parallel safely.
  forceExit: false,
};
