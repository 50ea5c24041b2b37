import { stopSharedService } from './support/service';
import { stopTestPostgres } from './support/pg';
import { stopSharedDevServer } from './support/temporal-server';

/** Root hooks: the shared service, Temporal dev server and test PostgreSQL are stopped once, after every file ran. */
export const mochaHooks = {
  async afterAll(this: Mocha.Context) {
    this.timeout(60_000);
    await stopSharedService();
    await stopSharedDevServer();
    await stopTestPostgres();
  },
};
