"""Type stub for the parts of MuJoCo's Python bindings that robogen uses.

MuJoCo's compiled bindings (``mujoco._structs``, ``_functions``, ``_enums``, ...) ship no type
information, so every ``mujoco.X`` was an unknown attribute to the type checker. This stub
declares what robogen touches: the model, data, spec and rendering structs (their many fields
are read through ``__getattr__`` as ``Any``), the functions with the signatures of the
bindings' own docstrings, and the enums with all their members in MuJoCo 4.0 (pybind11 enums,
not ``int`` subclasses; ``int(e)``, ``e.value`` and ``e.name`` work). It is read by
basedpyright only (``stubPath = "typings"`` in pyproject.toml); a ``mujoco.X`` that is not
declared here is a type error: add it here, with its binding's signature.
"""

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, SupportsFloat, SupportsIndex, SupportsInt

import numpy as np
from numpy.typing import ArrayLike, NDArray

from . import egl as egl

__version__: str

_Int = SupportsInt | SupportsIndex
_Float = SupportsFloat | SupportsIndex

class FatalError(Exception): ...

class _Struct:
    """A binding struct: fields and methods not declared are ``Any``."""

    def __getattr__(self, name: str) -> Any: ...
    def __setattr__(self, name: str, value: Any) -> None: ...

class MjModel(_Struct):
    @staticmethod
    def from_xml_string(xml: str, assets: Mapping[str, bytes] | None = None) -> MjModel: ...
    @staticmethod
    def from_xml_path(filename: str, assets: Mapping[str, bytes] | None = None) -> MjModel: ...

class MjData(_Struct):
    def __init__(self, model: MjModel) -> None: ...

class MjSpec(_Struct):
    def __init__(self) -> None: ...
    @staticmethod
    def from_file(
        filename: str,
        include: Mapping[str, bytes] | None = None,
        assets: dict[str, Any] | None = None,
    ) -> MjSpec: ...
    @staticmethod
    def from_string(
        xml: str, include: Mapping[str, bytes] | None = None, assets: dict[str, Any] | None = None
    ) -> MjSpec: ...
    def compile(self) -> MjModel: ...
    def copy(self) -> MjSpec: ...
    def to_xml(self) -> str: ...

class MjsBody(_Struct): ...

class MjvCamera(_Struct):
    def __init__(self) -> None: ...

class MjvOption(_Struct):
    def __init__(self) -> None: ...

class MjvPerturb(_Struct):
    def __init__(self) -> None: ...

class MjvScene(_Struct):
    def __init__(self, model: MjModel = ..., maxgeom: _Int = ...) -> None: ...

class MjrRect(_Struct):
    def __init__(self, left: _Int, bottom: _Int, width: _Int, height: _Int) -> None: ...

class MjrContext(_Struct):
    def __init__(self, model: MjModel = ..., fontscale: _Int = ...) -> None: ...
    def free(self) -> None: ...

class GLContext:
    """An offscreen OpenGL context of the backend ``MUJOCO_GL`` names."""

    def __init__(self, max_width: int, max_height: int) -> None: ...
    def make_current(self) -> None: ...
    def free(self) -> None: ...

class Renderer:
    def __init__(
        self, model: MjModel, height: int = 240, width: int = 320, max_geom: int = 10000
    ) -> None: ...
    def update_scene(
        self,
        data: MjData,
        camera: int | str | MjvCamera = -1,
        scene_option: MjvOption | None = None,
    ) -> None: ...
    def render(self, *, out: NDArray[np.uint8] | None = None) -> NDArray[np.uint8]: ...
    def close(self) -> None: ...

class _Enum:
    """A pybind11 enum of the bindings."""

    @property
    def value(self) -> int: ...
    @property
    def name(self) -> str: ...
    def __init__(self, value: _Int) -> None: ...
    def __int__(self) -> int: ...
    def __index__(self) -> int: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

def mj_camlight(m: MjModel, d: MjData) -> None: ...
def mj_comPos(m: MjModel, d: MjData) -> None: ...
def mj_contactForce(m: MjModel, d: MjData, id: _Int, result: NDArray[np.float64]) -> None: ...
def mj_forward(m: MjModel, d: MjData) -> None: ...
def mj_fullM(m: MjModel, d: MjData, dst: NDArray[np.float64]) -> None: ...
def mj_geomDistance(
    m: MjModel,
    d: MjData,
    geom1: _Int,
    geom2: _Int,
    distmax: _Float,
    fromto: NDArray[np.float64] | None,
) -> float: ...
def mj_id2name(m: MjModel, type: _Int, id: _Int) -> str: ...
def mj_jacSite(
    m: MjModel,
    d: MjData,
    jacp: NDArray[np.float64] | None,
    jacr: NDArray[np.float64] | None,
    site: _Int,
) -> None: ...
def mj_kinematics(m: MjModel, d: MjData) -> None: ...
def mj_name2id(m: MjModel, type: _Int, name: str) -> int: ...
def mj_resetData(m: MjModel, d: MjData) -> None: ...
def mj_setConst(m: MjModel, d: MjData) -> None: ...
def mj_step(m: MjModel, d: MjData, nstep: _Int = 1) -> None: ...
def mj_step1(m: MjModel, d: MjData) -> None: ...
def mj_step2(m: MjModel, d: MjData) -> None: ...
def mjr_readPixels(
    rgb: ArrayLike | None, depth: ArrayLike | None, viewport: MjrRect, con: MjrContext
) -> None: ...
def mjr_render(viewport: MjrRect, scn: MjvScene, con: MjrContext) -> None: ...
def mjr_setBuffer(framebuffer: _Int, con: MjrContext) -> None: ...
def mjr_uploadTexture(m: MjModel, con: MjrContext, texid: _Int) -> None: ...
def mju_axisAngle2Quat(
    res: NDArray[np.float64], axis: NDArray[np.float64], angle: _Float
) -> None: ...
def mju_mat2Quat(quat: NDArray[np.float64], mat: NDArray[np.float64]) -> None: ...
def mju_quat2Mat(res: NDArray[np.float64], quat: NDArray[np.float64]) -> None: ...
def mjv_defaultFreeCamera(m: MjModel, cam: MjvCamera) -> None: ...
def mjv_updateScene(
    m: MjModel,
    d: MjData,
    opt: MjvOption,
    pert: MjvPerturb | None,
    cam: MjvCamera,
    catmask: _Int,
    scn: MjvScene,
) -> None: ...
def set_mju_user_warning(arg0: Callable[[str], None] | None) -> None: ...

class mjtBias(_Enum):
    mjBIAS_AFFINE: ClassVar[mjtBias]
    mjBIAS_DCMOTOR: ClassVar[mjtBias]
    mjBIAS_MUSCLE: ClassVar[mjtBias]
    mjBIAS_NONE: ClassVar[mjtBias]
    mjBIAS_SO3: ClassVar[mjtBias]
    mjBIAS_USER: ClassVar[mjtBias]

class mjtBuiltin(_Enum):
    mjBUILTIN_CHECKER: ClassVar[mjtBuiltin]
    mjBUILTIN_FLAT: ClassVar[mjtBuiltin]
    mjBUILTIN_GRADIENT: ClassVar[mjtBuiltin]
    mjBUILTIN_NONE: ClassVar[mjtBuiltin]

class mjtCamLight(_Enum):
    mjCAMLIGHT_FIXED: ClassVar[mjtCamLight]
    mjCAMLIGHT_TARGETBODY: ClassVar[mjtCamLight]
    mjCAMLIGHT_TARGETBODYCOM: ClassVar[mjtCamLight]
    mjCAMLIGHT_TRACK: ClassVar[mjtCamLight]
    mjCAMLIGHT_TRACKCOM: ClassVar[mjtCamLight]

class mjtCamera(_Enum):
    mjCAMERA_FIXED: ClassVar[mjtCamera]
    mjCAMERA_FREE: ClassVar[mjtCamera]
    mjCAMERA_TRACKING: ClassVar[mjtCamera]
    mjCAMERA_USER: ClassVar[mjtCamera]

class mjtCatBit(_Enum):
    mjCAT_ALL: ClassVar[mjtCatBit]
    mjCAT_DECOR: ClassVar[mjtCatBit]
    mjCAT_DYNAMIC: ClassVar[mjtCatBit]
    mjCAT_STATIC: ClassVar[mjtCatBit]

class mjtCone(_Enum):
    mjCONE_ELLIPTIC: ClassVar[mjtCone]
    mjCONE_PYRAMIDAL: ClassVar[mjtCone]

class mjtConstraint(_Enum):
    mjCNSTR_CONTACT_ELLIPTIC: ClassVar[mjtConstraint]
    mjCNSTR_CONTACT_FRICTIONLESS: ClassVar[mjtConstraint]
    mjCNSTR_CONTACT_PYRAMIDAL: ClassVar[mjtConstraint]
    mjCNSTR_EQUALITY: ClassVar[mjtConstraint]
    mjCNSTR_FRICTION_DOF: ClassVar[mjtConstraint]
    mjCNSTR_FRICTION_TENDON: ClassVar[mjtConstraint]
    mjCNSTR_LIMIT_JOINT: ClassVar[mjtConstraint]
    mjCNSTR_LIMIT_TENDON: ClassVar[mjtConstraint]

class mjtEq(_Enum):
    mjEQ_CONNECT: ClassVar[mjtEq]
    mjEQ_DISTANCE: ClassVar[mjtEq]
    mjEQ_FLEX: ClassVar[mjtEq]
    mjEQ_FLEXSTRAIN: ClassVar[mjtEq]
    mjEQ_FLEXVERT: ClassVar[mjtEq]
    mjEQ_JOINT: ClassVar[mjtEq]
    mjEQ_TENDON: ClassVar[mjtEq]
    mjEQ_WELD: ClassVar[mjtEq]

class mjtFontScale(_Enum):
    mjFONTSCALE_100: ClassVar[mjtFontScale]
    mjFONTSCALE_150: ClassVar[mjtFontScale]
    mjFONTSCALE_200: ClassVar[mjtFontScale]
    mjFONTSCALE_250: ClassVar[mjtFontScale]
    mjFONTSCALE_300: ClassVar[mjtFontScale]
    mjFONTSCALE_50: ClassVar[mjtFontScale]

class mjtFramebuffer(_Enum):
    mjFB_OFFSCREEN: ClassVar[mjtFramebuffer]
    mjFB_WINDOW: ClassVar[mjtFramebuffer]

class mjtGain(_Enum):
    mjGAIN_AFFINE: ClassVar[mjtGain]
    mjGAIN_DCMOTOR: ClassVar[mjtGain]
    mjGAIN_FIXED: ClassVar[mjtGain]
    mjGAIN_MUSCLE: ClassVar[mjtGain]
    mjGAIN_PID: ClassVar[mjtGain]
    mjGAIN_SO3: ClassVar[mjtGain]
    mjGAIN_USER: ClassVar[mjtGain]

class mjtGeom(_Enum):
    mjGEOM_ARROW: ClassVar[mjtGeom]
    mjGEOM_ARROW1: ClassVar[mjtGeom]
    mjGEOM_ARROW2: ClassVar[mjtGeom]
    mjGEOM_BOX: ClassVar[mjtGeom]
    mjGEOM_CAPSULE: ClassVar[mjtGeom]
    mjGEOM_CYLINDER: ClassVar[mjtGeom]
    mjGEOM_ELLIPSOID: ClassVar[mjtGeom]
    mjGEOM_FLEX: ClassVar[mjtGeom]
    mjGEOM_HFIELD: ClassVar[mjtGeom]
    mjGEOM_LABEL: ClassVar[mjtGeom]
    mjGEOM_LINE: ClassVar[mjtGeom]
    mjGEOM_LINEBOX: ClassVar[mjtGeom]
    mjGEOM_MESH: ClassVar[mjtGeom]
    mjGEOM_NONE: ClassVar[mjtGeom]
    mjGEOM_PLANE: ClassVar[mjtGeom]
    mjGEOM_SDF: ClassVar[mjtGeom]
    mjGEOM_SKIN: ClassVar[mjtGeom]
    mjGEOM_SPHERE: ClassVar[mjtGeom]
    mjGEOM_TRIANGLE: ClassVar[mjtGeom]
    mjNGEOMTYPES: ClassVar[mjtGeom]

class mjtIntegrator(_Enum):
    mjINT_DISCRETE: ClassVar[mjtIntegrator]
    mjINT_EULER: ClassVar[mjtIntegrator]
    mjINT_IMPLICIT: ClassVar[mjtIntegrator]
    mjINT_IMPLICITFAST: ClassVar[mjtIntegrator]
    mjINT_RK4: ClassVar[mjtIntegrator]

class mjtJoint(_Enum):
    mjJNT_BALL: ClassVar[mjtJoint]
    mjJNT_FREE: ClassVar[mjtJoint]
    mjJNT_HINGE: ClassVar[mjtJoint]
    mjJNT_SLIDE: ClassVar[mjtJoint]

class mjtLightType(_Enum):
    mjLIGHT_DIRECTIONAL: ClassVar[mjtLightType]
    mjLIGHT_IMAGE: ClassVar[mjtLightType]
    mjLIGHT_POINT: ClassVar[mjtLightType]
    mjLIGHT_SPOT: ClassVar[mjtLightType]

class mjtLimited(_Enum):
    mjLIMITED_AUTO: ClassVar[mjtLimited]
    mjLIMITED_FALSE: ClassVar[mjtLimited]
    mjLIMITED_TRUE: ClassVar[mjtLimited]

class mjtObj(_Enum):
    mjNOBJECT: ClassVar[mjtObj]
    mjOBJ_ACTUATOR: ClassVar[mjtObj]
    mjOBJ_BODY: ClassVar[mjtObj]
    mjOBJ_CAMERA: ClassVar[mjtObj]
    mjOBJ_DEFAULT: ClassVar[mjtObj]
    mjOBJ_DOF: ClassVar[mjtObj]
    mjOBJ_EQUALITY: ClassVar[mjtObj]
    mjOBJ_EXCLUDE: ClassVar[mjtObj]
    mjOBJ_FLEX: ClassVar[mjtObj]
    mjOBJ_FRAME: ClassVar[mjtObj]
    mjOBJ_GEOM: ClassVar[mjtObj]
    mjOBJ_HFIELD: ClassVar[mjtObj]
    mjOBJ_JOINT: ClassVar[mjtObj]
    mjOBJ_KEY: ClassVar[mjtObj]
    mjOBJ_LIGHT: ClassVar[mjtObj]
    mjOBJ_MATERIAL: ClassVar[mjtObj]
    mjOBJ_MESH: ClassVar[mjtObj]
    mjOBJ_MODEL: ClassVar[mjtObj]
    mjOBJ_NUMERIC: ClassVar[mjtObj]
    mjOBJ_PAIR: ClassVar[mjtObj]
    mjOBJ_PLUGIN: ClassVar[mjtObj]
    mjOBJ_SENSOR: ClassVar[mjtObj]
    mjOBJ_SITE: ClassVar[mjtObj]
    mjOBJ_SKIN: ClassVar[mjtObj]
    mjOBJ_TENDON: ClassVar[mjtObj]
    mjOBJ_TEXT: ClassVar[mjtObj]
    mjOBJ_TEXTURE: ClassVar[mjtObj]
    mjOBJ_TUPLE: ClassVar[mjtObj]
    mjOBJ_UNKNOWN: ClassVar[mjtObj]
    mjOBJ_XBODY: ClassVar[mjtObj]

class mjtRndFlag(_Enum):
    mjNRNDFLAG: ClassVar[mjtRndFlag]
    mjRND_ADDITIVE: ClassVar[mjtRndFlag]
    mjRND_CULL_FACE: ClassVar[mjtRndFlag]
    mjRND_DEPTH: ClassVar[mjtRndFlag]
    mjRND_FOG: ClassVar[mjtRndFlag]
    mjRND_HAZE: ClassVar[mjtRndFlag]
    mjRND_IDCOLOR: ClassVar[mjtRndFlag]
    mjRND_POST_PROCESSING: ClassVar[mjtRndFlag]
    mjRND_REFLECTION: ClassVar[mjtRndFlag]
    mjRND_SEGMENT: ClassVar[mjtRndFlag]
    mjRND_SHADOW: ClassVar[mjtRndFlag]
    mjRND_SKYBOX: ClassVar[mjtRndFlag]
    mjRND_WIREFRAME: ClassVar[mjtRndFlag]

class mjtTexture(_Enum):
    mjTEXTURE_2D: ClassVar[mjtTexture]
    mjTEXTURE_CUBE: ClassVar[mjtTexture]
    mjTEXTURE_SKYBOX: ClassVar[mjtTexture]

class mjtTextureRole(_Enum):
    mjNTEXROLE: ClassVar[mjtTextureRole]
    mjTEXROLE_EMISSIVE: ClassVar[mjtTextureRole]
    mjTEXROLE_METALLIC: ClassVar[mjtTextureRole]
    mjTEXROLE_NORMAL: ClassVar[mjtTextureRole]
    mjTEXROLE_OCCLUSION: ClassVar[mjtTextureRole]
    mjTEXROLE_OPACITY: ClassVar[mjtTextureRole]
    mjTEXROLE_ORM: ClassVar[mjtTextureRole]
    mjTEXROLE_RGB: ClassVar[mjtTextureRole]
    mjTEXROLE_RGBA: ClassVar[mjtTextureRole]
    mjTEXROLE_ROUGHNESS: ClassVar[mjtTextureRole]
    mjTEXROLE_USER: ClassVar[mjtTextureRole]

class mjtTrn(_Enum):
    mjTRN_BODY: ClassVar[mjtTrn]
    mjTRN_JOINT: ClassVar[mjtTrn]
    mjTRN_JOINTINPARENT: ClassVar[mjtTrn]
    mjTRN_SITE: ClassVar[mjtTrn]
    mjTRN_SLIDERCRANK: ClassVar[mjtTrn]
    mjTRN_SO3: ClassVar[mjtTrn]
    mjTRN_TENDON: ClassVar[mjtTrn]
    mjTRN_UNDEFINED: ClassVar[mjtTrn]

class mjtWarning(_Enum):
    mjNWARNING: ClassVar[mjtWarning]
    mjWARN_BADCTRL: ClassVar[mjtWarning]
    mjWARN_BADQACC: ClassVar[mjtWarning]
    mjWARN_BADQPOS: ClassVar[mjtWarning]
    mjWARN_BADQVEL: ClassVar[mjtWarning]
    mjWARN_CNSTRFULL: ClassVar[mjtWarning]
    mjWARN_CONTACTFULL: ClassVar[mjtWarning]
    mjWARN_INERTIA: ClassVar[mjtWarning]

class mjtWrap(_Enum):
    mjWRAP_CYLINDER: ClassVar[mjtWrap]
    mjWRAP_JOINT: ClassVar[mjtWrap]
    mjWRAP_NONE: ClassVar[mjtWrap]
    mjWRAP_PULLEY: ClassVar[mjtWrap]
    mjWRAP_SITE: ClassVar[mjtWrap]
    mjWRAP_SPHERE: ClassVar[mjtWrap]
