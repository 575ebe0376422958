"""Scene registration: poses of the table, belt and bins from a depth image.

Each scene element is a rigid set of boxes (the description's collision geometry) with a
nominal pose in ``base_link``. The observed cloud (depth image + intrinsics + camera pose) is
cropped around the element's current pose estimate and registered to the element's faces that
turn towards the camera, by robust (Tukey-weighted) point-to-plane Gauss-Newton, coarse to
fine, starting from the nominal pose (the description is within a few centimetres of the truth;
a global feature match would be ambiguous on these symmetric boxes). Correspondences are exact
closest points on the face rectangles. The crop shrinks with each stage so that neighbouring
elements stop contributing.

Degeneracy (Zhang, Kaess & Singh 2016, "On degeneracy of optimization-based state estimation
problems"): every update is solved only in the observable subspace of the normalised
point-to-plane information matrix; directions whose eigenvalue ratio is below
``min_observability`` are held at the current (initially nominal) estimate. An element may
declare directions that are allowed to be unobservable (:attr:`SceneElement.unobservable_ok`,
e.g. the belt's travel axis, whose ends are out of view); these are held at nominal and
reported. Any other unobservable direction refuses the registration, as do too few points, a
low fitness (inlier fraction) or a high inlier RMSE.

Directions known from physics rather than from the image (:attr:`SceneElement.held`) are not
solved at all: a bin standing on the table has the table's height, roll and pitch, so only x, y
and yaw are registered. At 2-3 m a 128 px depth image puts ~2 cm between points, so a bin's thin
wall tops and the strip of floor behind its front wall carry few points, and its height, roll and
pitch come out of the fit several mm / ~1 deg off; holding them at the nominal (description)
values also removes their coupling into x, y and yaw.

At this range a 128 px depth image places a bin to a few mm and ~0.5 deg (its pixels sample the
walls on a 2 cm grid); the procedure's ``bins`` step (:mod:`r2s2r_calibration.bin_views`) then
refines x, y and yaw from hand-camera views of the rims.

One module per concern: :mod:`.elements` (the scene elements: boxes, nominal pose, held and
allowed-unobservable directions), :mod:`.depth` (depth image to points), :mod:`.faces` (an
element's model surfaces: sampled points, bounds, face rectangles, closest points),
:mod:`.observability` (the point-to-plane information, its degenerate directions and their
names), :mod:`.point_to_plane` (one robust Gauss-Newton step), :mod:`.register` (registering
an element and a scene: crops, coarse-to-fine stages, acceptance, the results).
"""
