"""The envs: wrappers, the declarative pipeline, image and vector (execution) backends."""
