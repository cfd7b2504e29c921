import { Module } from '@nestjs/common';
import { ConsoleController } from './console.controller.js';

/** The reviewer console's static files and its public configuration (decision 0023). */
@Module({ controllers: [ConsoleController] })
export class ConsoleModule {}
