#!/usr/bin/env node
// The operator command: runs the TypeScript sources through tsx, no build step.
require('tsx/cjs');
require('../cli/svc.ts');
