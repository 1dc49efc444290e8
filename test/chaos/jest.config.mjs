// The chaos suite (issue 10): `pnpm test:chaos`. The root config's transform and global setup (the
// migrated template database and its env), but only this folder's *.chaos.ts (which `pnpm test`
// does not pick up), one file at a time: each scenario runs a whole stack of real processes.
import base from '../../jest.config.js';

/** @type {import('jest').Config} */
export default {
  ...base,
  rootDir: '../..',
  testMatch: ['<rootDir>/test/chaos/**/*.chaos.ts'],
  maxWorkers: 1,
  testTimeout: 360000,
};
